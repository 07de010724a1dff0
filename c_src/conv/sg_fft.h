/* PLACEHOLDER (being written): the FFT used by sg_conv_fft.inc */
#ifndef SG_FFT_H
#define SG_FFT_H
#endif
